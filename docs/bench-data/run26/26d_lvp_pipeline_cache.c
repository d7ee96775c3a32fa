#include <vulkan/vulkan.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
int main(int argc,char**argv){
  FILE*f=fopen(argv[1],"rb");fseek(f,0,2);long n=ftell(f);fseek(f,0,0);char*b=malloc(n);fread(b,1,n,f);fclose(f);
  VkApplicationInfo ai={.sType=VK_STRUCTURE_TYPE_APPLICATION_INFO,.apiVersion=VK_API_VERSION_1_3};
  VkInstanceCreateInfo ii={.sType=VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,.pApplicationInfo=&ai};
  VkInstance in;vkCreateInstance(&ii,0,&in);uint32_t c=1;VkPhysicalDevice pd;vkEnumeratePhysicalDevices(in,&c,&pd);
  float pr=1;VkDeviceQueueCreateInfo qi={.sType=VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,.queueCount=1,.pQueuePriorities=&pr};
  VkPhysicalDeviceVulkan12Features f12={.sType=VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,.bufferDeviceAddress=1,.shaderFloat16=1,.shaderInt8=1,.storageBuffer8BitAccess=1};
  VkPhysicalDeviceVulkan11Features f11={.sType=VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,.pNext=&f12,.storageBuffer16BitAccess=1};
  VkPhysicalDeviceVulkan13Features f13={.sType=VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,.pNext=&f11,.shaderIntegerDotProduct=1,.subgroupSizeControl=1,.computeFullSubgroups=1};
  VkPhysicalDeviceFeatures2 f2={.sType=VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,.pNext=&f13,.features={.shaderInt64=1,.shaderInt16=1}};
  VkDeviceCreateInfo di={.sType=VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,.pNext=&f2,.queueCreateInfoCount=1,.pQueueCreateInfos=&qi};
  VkDevice d; if(vkCreateDevice(pd,&di,0,&d)){printf("dev fail\n");return 1;}
  void*init=NULL;size_t isz=0;
  if(argc>2){FILE*g=fopen(argv[2],"rb");if(g){fseek(g,0,2);isz=ftell(g);fseek(g,0,0);init=malloc(isz);fread(init,1,isz,g);fclose(g);}}
  VkPipelineCacheCreateInfo ci={.sType=VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,.initialDataSize=isz,.pInitialData=init};
  VkPipelineCache pc;vkCreatePipelineCache(d,&ci,0,&pc);
  VkShaderModuleCreateInfo mi={.sType=VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,.codeSize=n,.pCode=(void*)b};
  VkShaderModule m;vkCreateShaderModule(d,&mi,0,&m);
  VkPushConstantRange r={VK_SHADER_STAGE_COMPUTE_BIT,0,128};
  VkPipelineLayoutCreateInfo li={.sType=VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,.pushConstantRangeCount=1,.pPushConstantRanges=&r};
  VkPipelineLayout l;vkCreatePipelineLayout(d,&li,0,&l);
  VkComputePipelineCreateInfo pi={.sType=VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,.stage={.sType=VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,.stage=VK_SHADER_STAGE_COMPUTE_BIT,.module=m,.pName="main"},.layout=l};
  VkPipeline p;double t0=now();VkResult res=vkCreateComputePipelines(d,pc,1,&pi,0,&p);double t1=now();
  size_t sz=0;vkGetPipelineCacheData(d,pc,&sz,0);
  printf("create %d %.1f ms, cache data %zu bytes (initial %zu)\n",res,t1-t0,sz,isz);
  void*out=malloc(sz);vkGetPipelineCacheData(d,pc,&sz,out);FILE*o=fopen("/tmp/pc/cache.bin","wb");fwrite(out,1,sz,o);fclose(o);
  return 0;}
